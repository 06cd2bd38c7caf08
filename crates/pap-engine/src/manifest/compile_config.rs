//! pap.yaml compile step: durations, limits and MCP server definitions.

use std::path::PathBuf;

use super::compile_agent::is_http_url;
use super::compiled::{Config, MIN_IDEMPOTENCY_TTL, McpServerSpec, ServeConfig};
use super::duration;
use super::file_ctx::{FileCtx, HelpExt};
use super::raw::{self, UnknownParentPolicy};
use super::yaml_tree::PathSeg;
use crate::interpolate::valid_env_name;
use crate::path;

pub fn compile(raw: &raw::ProjectConfig, ctx: &mut FileCtx, root: &std::path::Path) -> Config {
    let defaults = Config::default();
    let mut config = Config {
        state_dir: raw
            .state_dir
            .as_ref()
            .map(PathBuf::from)
            .unwrap_or(defaults.state_dir),
        spool_dir: raw.spool_dir.as_ref().map(PathBuf::from),
        store: raw.store.clone(),
        max_cascade_depth: raw.max_cascade_depth.unwrap_or(defaults.max_cascade_depth),
        unknown_triggered_by: raw
            .unknown_triggered_by
            .unwrap_or(UnknownParentPolicy::Reject),
        max_event_bytes: raw.max_event_bytes.unwrap_or(defaults.max_event_bytes),
        jsonpath_max_nodes: raw
            .jsonpath
            .as_ref()
            .and_then(|j| j.max_nodes)
            .map_or(defaults.jsonpath_max_nodes, |n| n as usize),
        jsonpath_max_saw_bytes: raw
            .jsonpath
            .as_ref()
            .and_then(|j| j.max_saw_bytes)
            .map_or(defaults.jsonpath_max_saw_bytes, |n| n as usize),
        ..defaults
    };
    if let Some(url) = &raw.store
        && let Err(e) =
            crate::database_url::parse(url, crate::database_url::Origin::ProjectFile, &|_| None)
    {
        ctx.at(
            "store-url",
            &path!["store"],
            format!("store `{}` is not usable: {e}", crate::database_url::redact(url)),
        )
        .help("e.g. `store: postgres://pap@db.internal:5432/pap`, the password in PAP_DATABASE_PASSWORD");
    }
    if let Some(text) = &raw.store_cache {
        match super::size::parse(text) {
            Ok(bytes) if bytes < MIN_STORE_CACHE => invalid_size(
                ctx,
                "store_cache",
                text,
                &format!(
                    "below {}, the least it may be",
                    super::size::format(MIN_STORE_CACHE)
                ),
            ),
            Ok(bytes) => config.store_cache = bytes,
            Err(reason) => invalid_size(ctx, "store_cache", text, &reason),
        }
    }
    if let Some(text) = &raw.idempotency_ttl {
        match duration::parse(text) {
            Ok(ttl) if ttl < MIN_IDEMPOTENCY_TTL => {
                ctx.at(
                    "idempotency-ttl",
                    &path!["idempotency_ttl"],
                    format!("idempotency TTL `{text}` is below 24h; PAP 0.2 keeps keys at least 24 hours"),
                )
                .help("use 24h or more, e.g. `48h` or `7d`");
            }
            Ok(ttl) => config.idempotency_ttl = ttl,
            Err(reason) => invalid_duration(ctx, "idempotency_ttl", text, reason.reason()),
        }
    }
    if let Some(text) = &raw.approval_timeout {
        match duration::parse(text) {
            Ok(d) if d.is_zero() => {
                invalid_duration(ctx, "approval_timeout", text, "must be longer than zero")
            }
            Ok(d) => config.approval_timeout = d,
            Err(reason) => invalid_duration(ctx, "approval_timeout", text, reason.reason()),
        }
    }
    if let Some(serve) = &raw.serve {
        compile_serve(ctx, serve, &mut config.serve);
    }
    config.notify = super::compile_notify::compile_settings(raw.notifications.as_ref(), ctx);
    for (i, name) in raw.secrets.iter().enumerate() {
        if valid_env_name(name) {
            config.secrets.push(name.clone());
        } else {
            ctx.at(
                "invalid-env-name",
                &path!["secrets", i],
                format!("`{name}` is not an environment variable name"),
            );
        }
    }
    config.adapters = super::compile_adapter::compile_all(&raw.adapters, ctx);
    if let Some(chat) = &raw.chat {
        if let Some(n) = chat.max_posts_per_minute {
            config.chat.max_posts_per_minute = n.max(1);
        }
        config.chat.approvers = chat.approvers.clone();
    }
    if let Some(t) = &raw.traces {
        if let Some(url) = &t.endpoint {
            if is_http_url(url) {
                config.traces.endpoint = Some(url.clone());
            } else {
                ctx.at(
                    "invalid-url",
                    &path!["traces", "endpoint"],
                    "`traces.endpoint` is not an http(s) URL",
                )
                .help("e.g. `endpoint: http://otel-collector:4318/v1/traces`");
            }
        }
        if let Some(name) = &t.service_name {
            config.traces.service_name = name.clone();
        }
        if let Some(n) = t.max_queue {
            config.traces.max_queue = n.max(1) as usize;
        }
        config.traces.to_providers = t.to_providers.unwrap_or(false);
    }
    if let Some(prices) = &raw.prices {
        config.prices = super::prices::compile(prices, ctx);
    }
    if let Some(listen) = &raw.listen {
        config.listen = super::compile_listen::compile(listen, ctx);
    }
    for (name, server) in &raw.mcp_servers {
        if let Some(spec) = compile_server(ctx, name, server, root) {
            config.mcp_servers.insert(name.clone(), spec);
        }
    }
    config
}

fn compile_serve(ctx: &mut FileCtx, raw: &raw::ServeSettings, out: &mut ServeConfig) {
    if let Some(n) = raw.max_concurrent {
        out.max_concurrent = n as usize;
    }
    out.log_decisions = raw.log_decisions.unwrap_or(false);
    let fields = [
        (
            "grace_period",
            &raw.grace_period,
            &mut out.grace_period,
            true,
        ),
        (
            "rescan_interval",
            &raw.rescan_interval,
            &mut out.rescan_interval,
            false,
        ),
        (
            "done_retention",
            &raw.done_retention,
            &mut out.done_retention,
            true,
        ),
        (
            "ledger_retention",
            &raw.ledger_retention,
            &mut out.ledger_retention,
            false,
        ),
        (
            "invocation_retention",
            &raw.invocation_retention,
            &mut out.invocation_retention,
            false,
        ),
        (
            "notification_retention",
            &raw.notification_retention,
            &mut out.notification_retention,
            false,
        ),
        (
            "inbox_retention",
            &raw.inbox_retention,
            &mut out.inbox_retention,
            false,
        ),
        (
            "audit_retention",
            &raw.audit_retention,
            &mut out.audit_retention,
            false,
        ),
        (
            "spool_settle",
            &raw.spool_settle,
            &mut out.spool_settle,
            true,
        ),
        ("lease", &raw.lease, &mut out.lease, false),
    ];
    for (field, text, target, zero_ok) in fields {
        let Some(text) = text else { continue };
        let at = path!["serve", field];
        match duration::parse(text) {
            Ok(d) if d.is_zero() && !zero_ok => {
                duration_error(ctx, &at, field, text, "must be longer than zero")
            }
            // Renewed every third of it, by a round trip to the database: shorter would
            // be lost to a slow commit.
            Ok(d) if field == "lease" && d < std::time::Duration::from_secs(1) => {
                duration_error(ctx, &at, field, text, "must be at least 1s")
            }
            Ok(d) => *target = d,
            Err(reason) => duration_error(ctx, &at, field, text, reason.reason()),
        }
    }
}

/// The least `store_cache`: below a megabyte even the pages of one transaction's path down
/// each table are read from the file again and again.
const MIN_STORE_CACHE: u64 = 1 << 20;

fn invalid_size(ctx: &mut FileCtx, field: &str, text: &str, reason: &str) {
    ctx.at(
        "invalid-size",
        &path![field],
        format!("`{field}` `{text}`: {reason}"),
    )
    .help("sizes look like 64MiB, 512MiB or 1GiB");
}

fn invalid_duration(ctx: &mut FileCtx, field: &str, text: &str, reason: &str) {
    duration_error(ctx, &path![field], field, text, reason);
}

fn duration_error(ctx: &mut FileCtx, at: &[PathSeg], field: &str, text: &str, reason: &str) {
    ctx.at(
        "invalid-duration",
        at,
        format!("`{field}` `{text}`: {reason}"),
    )
    .help("durations look like 90s, 30m, 24h, 7d or 1h30m");
}

fn compile_server(
    ctx: &mut FileCtx,
    name: &str,
    s: &raw::McpServer,
    root: &std::path::Path,
) -> Option<McpServerSpec> {
    let base = path!["mcp_servers", name];
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        ctx.at_key(
            "invalid-id",
            &base,
            format!("MCP server name `{name}` must use only letters, digits, `-` and `_` (it appears in mcp://{name})"),
        );
    }
    check_env_map(ctx, &s.env, &path!["mcp_servers", name, "env"]);
    for (key, value) in &s.headers {
        check_interpolation(
            ctx,
            value,
            &path!["mcp_servers", name, "headers", key.as_str()],
        );
    }
    match (&s.command, &s.url) {
        (Some(command), None) => {
            if !s.headers.is_empty() {
                ctx.at_key(
                    "unused-field",
                    &path!["mcp_servers", name, "headers"],
                    "`headers` only apply to `url` servers",
                );
            }
            // As for `model.command`: a warning, since the program may be installed later.
            if let Err(why) = crate::program::locate(command, root) {
                ctx.at(
                    "command-not-found",
                    &path!["mcp_servers", name, "command"],
                    format!("MCP server `{name}`: {why}; agents that use it will fail"),
                );
            }
            Some(McpServerSpec::Stdio {
                command: command.clone(),
                args: s.args.clone(),
                env: s.env.clone(),
            })
        }
        (None, Some(url)) => {
            if !is_http_url(url) {
                ctx.at(
                    "invalid-url",
                    &path!["mcp_servers", name, "url"],
                    format!("`url` `{url}` must start with http:// or https://"),
                );
                return None;
            }
            for (field, set) in [("args", !s.args.is_empty()), ("env", !s.env.is_empty())] {
                if set {
                    ctx.at_key(
                        "unused-field",
                        &path!["mcp_servers", name, field],
                        format!("`{field}` only applies to `command` servers"),
                    );
                }
            }
            Some(McpServerSpec::Http {
                url: url.clone(),
                headers: s.headers.clone(),
            })
        }
        (command, _) => {
            let what = if command.is_some() { "both" } else { "neither" };
            ctx.at_key(
                "mcp-server-transport",
                &base,
                format!("MCP server `{name}` has {what} of `command` and `url`; give exactly one"),
            )
            .help("`command` (+ `args`, `env`) starts a local stdio server; `url` connects to a streamable HTTP server");
            None
        }
    }
}

/// An `env` map (an MCP server's, a command agent's `model.env`) at `at`: variable names as
/// keys, `${NAME}` interpolation in the values.
pub(crate) fn check_env_map(
    ctx: &mut FileCtx,
    env: &std::collections::BTreeMap<String, String>,
    at: &[PathSeg],
) {
    for (key, value) in env {
        let mut here = at.to_vec();
        here.push(PathSeg::from(key.as_str()));
        if !valid_env_name(key) {
            ctx.at_key(
                "invalid-env-name",
                &here,
                format!("`{key}` is not an environment variable name"),
            );
        }
        check_interpolation(ctx, value, &here);
    }
}

/// `${NAME}` takes NAME from pap's environment; `$$` is a literal `$`; any other `$` is a typo.
fn check_interpolation(ctx: &mut FileCtx, value: &str, at: &[super::yaml_tree::PathSeg]) {
    if let Err(reason) = crate::interpolate::check(value) {
        ctx.at("invalid-interpolation", at, format!("`{value}`: {reason}"))
            .help("write ${NAME} to take NAME from pap's environment, $$ for a literal $");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The config `yaml` (pap.yaml) compiles to, and the codes it reports.
    fn config_of(yaml: &str) -> (Config, Vec<&'static str>) {
        let tree = crate::manifest::yaml_tree::parse(yaml).unwrap();
        let raw: raw::ProjectConfig = serde_saphyr::from_str(yaml).unwrap();
        let mut diags = Vec::new();
        let mut ctx = FileCtx {
            file: "pap.yaml",
            tree: &tree,
            diags: &mut diags,
        };
        let config = compile(&raw, &mut ctx, std::path::Path::new("/project"));
        (config, diags.iter().map(|d| d.code).collect())
    }

    #[test]
    fn store_cache_is_a_size_of_at_least_a_mebibyte() {
        let (config, codes) = config_of("pap_version: \"0.2\"\n");
        assert!(codes.is_empty(), "{codes:?}");
        assert_eq!(config.store_cache, 256 << 20);
        let (config, codes) = config_of("store_cache: 64MiB\n");
        assert!(codes.is_empty(), "{codes:?}");
        assert_eq!(config.store_cache, 64 << 20);
        for bad in ["64MB", "512KiB", "lots", "1.5GiB"] {
            let (config, codes) = config_of(&format!("store_cache: {bad}\n"));
            assert_eq!(codes, ["invalid-size"], "{bad}");
            assert_eq!(config.store_cache, 256 << 20, "{bad}");
        }
    }
}
