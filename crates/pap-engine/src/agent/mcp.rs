//! The MCP client (rmcp): connects the servers an agent's tools name, for one attempt.
//!
//! A stdio server is a child process that gets only the environment `pap.yaml` gives it plus
//! `PATH` and the locale, never the dispatcher's own (which holds the provider keys). Its stderr is drained
//! (a full pipe would stall it) and its last lines explain a failure. A streamable HTTP server
//! is reached by URL with the headers `pap.yaml` gives. Everything is shut down when the
//! attempt ends.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ContentBlock,
    Implementation,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::Value;
use tokio::io::AsyncBufReadExt;

use crate::interpolate;
use crate::manifest::compiled::McpServerSpec;

/// Lines of a server's stderr kept to explain a failure.
const STDERR_TAIL: usize = 10;

/// A tool as its server describes it.
#[derive(Debug, Clone)]
pub struct ServerTool {
    pub server: String,
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// What a tool call returned: its content as text, and whether the server flagged an error.
#[derive(Debug, Clone)]
pub struct CallOutcome {
    pub text: String,
    pub is_error: bool,
}

struct Server {
    service: RunningService<RoleClient, ClientConfig>,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

/// The servers of one attempt.
pub struct Session {
    servers: BTreeMap<String, Server>,
}

impl Session {
    /// Starts or connects every server in `names`; the first that fails fails the whole.
    /// `context` is what a stdio server learns of the run it serves (`PAP_INVOCATION_ID`,
    /// `PAP_AGENT_ID`): `pap mcp` as an agent's server makes its posts that run's children,
    /// so the cascade depth bounds a chain of them.
    pub async fn connect(
        root: &Path,
        specs: &BTreeMap<String, McpServerSpec>,
        names: &BTreeSet<String>,
        context: &[(&str, &str)],
    ) -> Result<Session, ConnectError> {
        let mut session = Session {
            servers: BTreeMap::new(),
        };
        for name in names {
            let spec = specs.get(name).ok_or_else(|| {
                ConnectError::permanent(format!(
                    "MCP server `{name}` is not defined under mcp_servers in pap.yaml"
                ))
            })?;
            match connect_one(root, name, spec, context).await {
                Ok(server) => {
                    session.servers.insert(name.clone(), server);
                }
                Err(e) => {
                    session.shutdown().await;
                    return Err(e);
                }
            }
        }
        Ok(session)
    }

    /// Every tool of every connected server.
    pub async fn list_tools(&self) -> Result<Vec<ServerTool>, ToolsNotListed> {
        self.list_tools_reason().await.map_err(ToolsNotListed::from)
    }

    /// [`Self::list_tools`], with the reason as text.
    pub(crate) async fn list_tools_reason(&self) -> Result<Vec<ServerTool>, String> {
        let mut out = Vec::new();
        for (name, server) in &self.servers {
            let tools = server.service.list_all_tools().await.map_err(|e| {
                format!(
                    "MCP server `{name}` did not list its tools: {e}{}",
                    tail(&server.stderr)
                )
            })?;
            out.extend(tools.into_iter().map(|t| ServerTool {
                server: name.clone(),
                name: t.name.to_string(),
                description: t.description.map(|d| d.to_string()).unwrap_or_default(),
                input_schema: Value::Object((*t.input_schema).clone()),
            }));
        }
        Ok(out)
    }

    /// Calls `tool` on `server`. A protocol or transport failure is `Err`; a tool that ran and
    /// failed is `Ok` with `is_error`.
    pub(crate) async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: serde_json::Map<String, Value>,
    ) -> Result<CallOutcome, String> {
        let s = self
            .servers
            .get(server)
            .ok_or_else(|| format!("MCP server `{server}` is not connected"))?;
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let result = s.service.call_tool(params).await.map_err(|e| {
            format!(
                "MCP server `{server}` failed on `{tool}`: {e}{}",
                tail(&s.stderr)
            )
        })?;
        Ok(outcome(result))
    }

    /// Closes every server (a stdio child gets its stdin closed, then SIGTERM, then SIGKILL).
    pub async fn shutdown(&mut self) {
        for (_, server) in std::mem::take(&mut self.servers) {
            let _ = server.service.cancel().await;
        }
    }
}

fn client_info() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("pap", env!("CARGO_PKG_VERSION")),
    )
}

/// Why an agent's MCP server could not be reached, and whether trying again can help: a
/// command that does not exist or may not run, a variable this process lacks, a header
/// that is not one, cannot start on a second attempt, so the invocation ends at once (as
/// with a missing API key) instead of waiting out its retries.
#[derive(Debug, Clone)]
pub struct ConnectError {
    pub reason: String,
    pub(crate) permanent: bool,
}

impl ConnectError {
    fn permanent(reason: String) -> ConnectError {
        ConnectError {
            reason,
            permanent: true,
        }
    }

    fn transient(reason: String) -> ConnectError {
        ConnectError {
            reason,
            permanent: false,
        }
    }
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

async fn connect_one(
    root: &Path,
    name: &str,
    spec: &McpServerSpec,
    context: &[(&str, &str)],
) -> Result<Server, ConnectError> {
    let expand = |what: &str, value: &str| {
        interpolate::expand(value, |var| std::env::var(var).ok())
            .map_err(|e| ConnectError::permanent(format!("MCP server `{name}`: {what}: {e}")))
    };
    match spec {
        McpServerSpec::Stdio { command, args, env } => {
            let program = if command.contains('/') {
                root.join(command)
            } else {
                command.into()
            };
            let mut cmd = tokio::process::Command::new(&program);
            cmd.args(args)
                .current_dir(root)
                .env_clear()
                .envs(crate::command::base_env())
                .envs(context.iter().copied());
            for (key, value) in env {
                cmd.env(key, expand(&format!("env {key}"), value)?);
            }
            cmd.kill_on_drop(true);
            let (transport, stderr) = TokioChildProcess::builder(cmd)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| {
                    let reason = format!("MCP server `{name}`: cannot start `{command}`: {e}");
                    match e.kind() {
                        std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied => {
                            ConnectError::permanent(reason)
                        }
                        _ => ConnectError::transient(reason),
                    }
                })?;
            let tail_lines = Arc::new(Mutex::new(VecDeque::new()));
            if let Some(stderr) = stderr {
                let keep = tail_lines.clone();
                tokio::spawn(async move {
                    let mut lines = tokio::io::BufReader::new(stderr).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        let mut keep = keep.lock().expect("stderr tail");
                        if keep.len() == STDERR_TAIL {
                            keep.pop_front();
                        }
                        keep.push_back(line);
                    }
                });
            }
            let service = client_info().serve(transport).await.map_err(|e| {
                ConnectError::transient(format!(
                    "MCP server `{name}` (`{command}`) did not answer the MCP handshake: {e}{}",
                    tail(&tail_lines)
                ))
            })?;
            Ok(Server {
                service,
                stderr: tail_lines,
            })
        }
        McpServerSpec::Http { url, headers } => {
            let mut map = std::collections::HashMap::new();
            for (key, value) in headers {
                let value = expand(&format!("header {key}"), value)?;
                let header = HeaderName::from_bytes(key.as_bytes()).map_err(|e| {
                    ConnectError::permanent(format!("MCP server `{name}`: header {key}: {e}"))
                })?;
                let mut value = HeaderValue::from_str(&value).map_err(|_| {
                    ConnectError::permanent(format!(
                        "MCP server `{name}`: header {key} has an invalid value"
                    ))
                })?;
                value.set_sensitive(true);
                map.insert(header, value);
            }
            if let Some((_, tp)) = context.iter().find(|(k, _)| *k == "TRACEPARENT")
                && let Ok(value) = HeaderValue::from_str(tp)
            {
                map.insert(HeaderName::from_static("traceparent"), value);
            }
            let config =
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(map);
            crate::http_client::install_tls_provider();
            let transport = StreamableHttpClientTransport::from_config(config);
            let service = client_info().serve(transport).await.map_err(|e| {
                ConnectError::transient(format!("MCP server `{name}` ({url}) did not answer: {e}"))
            })?;
            Ok(Server {
                service,
                stderr: Arc::new(Mutex::new(VecDeque::new())),
            })
        }
    }
}

/// Text blocks as they are; anything else (images, resources) as its JSON, so the model sees
/// that something came back. Structured content is used when there is no other content.
fn outcome(result: CallToolResult) -> CallOutcome {
    let mut parts = Vec::new();
    for block in &result.content {
        match block {
            ContentBlock::Text(t) => parts.push(t.text.clone()),
            other => parts.push(serde_json::to_string(other).unwrap_or_default()),
        }
    }
    if parts.is_empty()
        && let Some(structured) = &result.structured_content
    {
        parts.push(structured.to_string());
    }
    CallOutcome {
        text: parts.join("\n"),
        is_error: result.is_error.unwrap_or(false),
    }
}

fn tail(lines: &Mutex<VecDeque<String>>) -> String {
    let lines = lines.lock().expect("stderr tail");
    if lines.is_empty() {
        String::new()
    } else {
        let joined: Vec<&str> = lines.iter().map(String::as_str).collect();
        format!(" (its stderr ends: {})", joined.join(" | "))
    }
}

crate::reason::reason_error!(
    /// Why the MCP servers' tools could not be listed (the server named, with the tail of its stderr).
    ToolsNotListed
);
