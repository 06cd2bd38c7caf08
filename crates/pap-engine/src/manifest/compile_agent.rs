//! Agent compile step: provider requirements, tool sources, emitted event types, risk.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::compile_trigger::check_id;
use super::compiled::{Agent, LlmModel, ModelSpec, OutputSpec, RetryPolicy, ToolSpec};
use super::file_ctx::{FileCtx, HelpExt};
use super::raw::{self, Impact, OutputType, Provider, RiskLevel};
use super::yaml_tree::display_path;
use crate::diagnostics::did_you_mean;
use crate::event_type;
use crate::interpolate::valid_env_name;
use crate::path;

/// What an agent compile needs from the rest of the project.
pub struct AgentEnv<'a> {
    pub root: &'a Path,
    /// MCP server names from pap.yaml; `None` when pap.yaml itself is broken (skip the check).
    pub servers: Option<&'a BTreeSet<String>>,
}

pub fn compile(raw: &raw::Agent, ctx: &mut FileCtx, env: &AgentEnv) -> Option<Agent> {
    let errors_before = ctx.error_count();
    check_id(ctx, &raw.id, &path!["agent", "id"]);
    let model = compile_model(ctx, raw, env.root);
    let tools = compile_tools(ctx, raw, env);
    let output = compile_output(ctx, raw);
    let on_complete_emit = raw.on_complete.as_ref().and_then(|c| c.emit_event.clone());
    let on_failure_emit = raw.on_failure.as_ref().and_then(|f| f.emit_event.clone());
    if let Some(t) = &on_complete_emit {
        check_emit_type(ctx, t, &path!["agent", "on_complete", "emit_event"], false);
    }
    if let Some(t) = &on_failure_emit {
        check_emit_type(ctx, t, &path!["agent", "on_failure", "emit_event"], false);
    }
    for (i, t) in raw.emits.iter().enumerate() {
        check_emit_type(ctx, t, &path!["agent", "emits", i], true);
    }
    let retry = raw
        .on_failure
        .as_ref()
        .and_then(|f| f.retry.as_ref())
        .map(|r| RetryPolicy {
            max_attempts: u32::try_from(r.max_attempts).unwrap_or(1),
            backoff: Duration::from_secs_f64(r.backoff_seconds.unwrap_or(0.0).max(0.0)),
        })
        .unwrap_or_default();
    let effective_risk = tools
        .iter()
        .filter_map(|(_, override_)| *override_)
        .fold(raw.risk_level, RiskLevel::max);

    let notify = super::compile_notify::compile_routes(raw.notify.as_ref(), "agent", ctx);
    let budget = raw
        .budget
        .as_ref()
        .and_then(|b| compile_budget(ctx, raw, b));
    let concurrency = raw.concurrency.as_ref().and_then(|c| {
        super::compile_trigger::compile_concurrency(ctx, c, &path!["agent", "concurrency"])
    });
    let mut flags: Vec<_> = raw
        .flags
        .iter()
        .chain(raw.tools.iter().flat_map(|t| t.flags.iter()))
        .copied()
        .collect();
    flags.sort();
    flags.dedup();

    if ctx.error_count() > errors_before {
        return None;
    }
    Some(Agent {
        id: raw.id.clone(),
        description: raw.description.clone(),
        risk_level: raw.risk_level,
        effective_risk,
        model: model?,
        system_prompt: raw.system_prompt.clone(),
        tools: tools.into_iter().map(|(t, _)| t).collect(),
        max_runtime: raw
            .limits
            .as_ref()
            .and_then(|l| l.max_runtime_seconds)
            .map(Duration::from_secs),
        max_tool_calls: raw.limits.as_ref().and_then(|l| l.max_tool_calls),
        output,
        on_complete_emit,
        on_failure_emit,
        retry,
        emits: raw.emits.clone(),
        flags,
        notify,
        concurrency,
        budget,
        file: ctx.file.to_string(),
    })
}

fn compile_budget(
    ctx: &mut FileCtx,
    agent: &raw::Agent,
    b: &raw::Budget,
) -> Option<crate::manifest::compiled::Budget> {
    if b.usd_per_day.is_some() && b.money_per_day.is_some() {
        ctx.at_key(
            "unused-field",
            &path!["agent", "budget", "money_per_day"],
            "`budget` sets both `usd_per_day` and `money_per_day`: keep one",
        );
        return None;
    }
    let money = b.usd_per_day.or(b.money_per_day);
    if b.invocations_per_day.is_none() && b.tokens_per_day.is_none() && money.is_none() {
        ctx.at(
            "missing-field",
            &path!["agent", "budget"],
            "`budget` sets none of `invocations_per_day`, `tokens_per_day`, `usd_per_day` and `money_per_day`",
        )
        .help("e.g. `budget: {invocations_per_day: 50}`");
        return None;
    }
    let money_per_day = match money {
        // At least one millionth: a smaller amount would round to nothing.
        Some(amount)
            if amount.is_finite() && amount >= 0.000_001 && amount * 1e6 < u64::MAX as f64 =>
        {
            Some((amount * 1_000_000.0).round() as u64)
        }
        Some(amount) => {
            let field = if b.usd_per_day.is_some() {
                "usd_per_day"
            } else {
                "money_per_day"
            };
            ctx.at(
                "wrong-type",
                &path!["agent", "budget", field],
                format!("`{field}` {amount} is not an amount of money of at least 0.000001"),
            );
            return None;
        }
        None => None,
    };
    // A token or money budget bounds a run only if the run is bounded: its reservation is
    // max_tokens × (max_tool_calls + 1) tokens, worked out here once for every run.
    let mut run_tokens = None;
    let bounded = b
        .tokens_per_day
        .map(|n| ("tokens_per_day", Some(n)))
        .or(money_per_day.map(|_| {
            (
                if b.usd_per_day.is_some() {
                    "usd_per_day"
                } else {
                    "money_per_day"
                },
                None,
            )
        }));
    if let Some((field, per_day)) = bounded {
        let per_turn = match agent.model.provider {
            raw::Provider::Command => None,
            raw::Provider::Anthropic => Some(
                agent
                    .model
                    .max_tokens
                    .unwrap_or(crate::manifest::compiled::ANTHROPIC_DEFAULT_MAX_TOKENS),
            ),
            raw::Provider::Openai => agent.model.max_tokens,
        };
        let calls = agent.limits.as_ref().and_then(|l| l.max_tool_calls);
        let llm = !matches!(agent.model.provider, raw::Provider::Command);
        match (llm, per_turn, calls) {
            (false, ..) => {}
            (true, Some(per_turn), Some(calls)) => {
                let run = u64::from(per_turn).saturating_mul(calls.saturating_add(1));
                if let Some(per_day) = per_day
                    && u64::try_from(per_day).unwrap_or(0) < run
                {
                    ctx.at(
                        "budget-needs-turn-limit",
                        &path!["agent", "budget", "tokens_per_day"],
                        format!(
                            "`tokens_per_day` {per_day} is less than one run reserves ({run} = max_tokens {per_turn} × (max_tool_calls {calls} + 1)): no run could start"
                        ),
                    );
                    return None;
                }
                run_tokens = Some(run);
            }
            (true, ..) => {
                ctx.at(
                    "budget-needs-turn-limit",
                    &path!["agent", "budget", field],
                    "a token or money budget needs `limits.max_tool_calls` (and for openai `model.max_tokens`): without them a run's tokens have no bound to reserve",
                )
                .help("set `limits: {max_tool_calls: 8}`: a run then reserves max_tokens × 9 tokens");
                return None;
            }
        }
    }
    Some(crate::manifest::compiled::Budget {
        invocations_per_day: b.invocations_per_day.and_then(|n| u64::try_from(n).ok()),
        tokens_per_day: b.tokens_per_day.and_then(|n| u64::try_from(n).ok()),
        money_per_day,
        money_in_usd: b.usd_per_day.is_some(),
        run_tokens,
    })
}

fn compile_model(ctx: &mut FileCtx, raw: &raw::Agent, root: &Path) -> Option<ModelSpec> {
    let m = &raw.model;
    let provider = m.provider.as_str();
    let unused = |ctx: &mut FileCtx, field: &str, why: &str| {
        ctx.at_key(
            "unused-field",
            &path!["agent", "model", field],
            format!("`model.{field}` has no effect with provider `{provider}`: {why}"),
        );
    };
    if let Some(url) = &m.base_url
        && !is_http_url(url)
    {
        ctx.at(
            "invalid-url",
            &path!["agent", "model", "base_url"],
            format!("`base_url` `{url}` must start with http:// or https://"),
        );
    }
    if let Some(name) = &m.api_key_env
        && !valid_env_name(name)
    {
        ctx.at(
            "invalid-env-name",
            &path!["agent", "model", "api_key_env"],
            format!("`{name}` is not an environment variable name"),
        );
    }
    match m.provider {
        Provider::Command => {
            for (field, set) in [
                ("model_id", m.model_id.is_some()),
                ("max_tokens", m.max_tokens.is_some()),
                ("temperature", m.temperature.is_some()),
                ("base_url", m.base_url.is_some()),
                ("api_key_env", m.api_key_env.is_some()),
            ] {
                if set {
                    unused(
                        ctx,
                        field,
                        "a command agent is a local program, not a model",
                    );
                }
            }
            if raw.system_prompt.is_some() {
                ctx.at_key(
                    "unused-field",
                    &path!["agent", "system_prompt"],
                    "`system_prompt` has no effect with provider `command`",
                );
            }
            let argv = m.command.as_deref().unwrap_or_default();
            let Some(program) = argv.first().filter(|p| !p.trim().is_empty()) else {
                let at = if m.command.is_some() {
                    path!["agent", "model", "command"]
                } else {
                    path!["agent", "model", "provider"]
                };
                ctx.at("missing-command", &at, "provider `command` needs `model.command`: the program and its arguments as a list")
                    .help("e.g. command: [\"./agents/bin/triage.sh\", \"--verbose\"]");
                return None;
            };
            let resolved = if program.contains('/') {
                let p = Path::new(program);
                if p.is_absolute() {
                    p.to_path_buf()
                } else {
                    root.join(p)
                }
            } else {
                PathBuf::from(program)
            };
            if program.contains('/') && !crate::program::is_executable(&resolved) {
                ctx.at(
                    "command-not-found",
                    &path!["agent", "model", "command", 0usize],
                    format!("`{program}` does not exist or is not executable (resolved against the project root)"),
                );
            }
            super::compile_config::check_env_map(ctx, &m.env, &path!["agent", "model", "env"]);
            Some(ModelSpec::Command {
                program: resolved,
                args: argv[1..].to_vec(),
                env: m.env.clone(),
            })
        }
        Provider::Anthropic | Provider::Openai => {
            if m.command.is_some() {
                unused(ctx, "command", "only provider `command` runs a program");
            }
            if !m.env.is_empty() {
                unused(ctx, "env", "only provider `command` runs a program");
            }
            let Some(model_id) = m.model_id.clone().filter(|s| !s.trim().is_empty()) else {
                ctx.at(
                    "missing-model-id",
                    &path!["agent", "model", "provider"],
                    format!("provider `{provider}` needs `model.model_id`"),
                )
                .help(if m.provider == Provider::Anthropic {
                    "e.g. model_id: claude-sonnet-4-20250514"
                } else {
                    "e.g. model_id: gpt-4o-mini, or a local model such as llama3.1:8b"
                });
                return None;
            };
            let default_key = if m.provider == Provider::Anthropic {
                "ANTHROPIC_API_KEY"
            } else {
                "OPENAI_API_KEY"
            };
            let llm = LlmModel {
                model_id,
                max_tokens: m.max_tokens,
                temperature: m.temperature,
                base_url: m.base_url.clone(),
                api_key_env: m
                    .api_key_env
                    .clone()
                    .unwrap_or_else(|| default_key.to_string()),
            };
            Some(if m.provider == Provider::Anthropic {
                ModelSpec::Anthropic(llm)
            } else {
                ModelSpec::Openai(llm)
            })
        }
    }
}

/// Returns each tool with its explicit risk override (for the effective risk).
fn compile_tools(
    ctx: &mut FileCtx,
    raw: &raw::Agent,
    env: &AgentEnv,
) -> Vec<(ToolSpec, Option<RiskLevel>)> {
    if raw.model.provider == Provider::Command && !raw.tools.is_empty() {
        ctx.at_key(
            "unused-field",
            &path!["agent", "tools"],
            "`tools` has no effect with provider `command`: only LLM agents are offered MCP tools",
        );
    }
    let mut seen: Vec<(&str, &str)> = Vec::new();
    let mut out = Vec::new();
    for (i, tool) in raw.tools.iter().enumerate() {
        let server = match tool.source.strip_prefix("mcp://") {
            Some(name) if !name.is_empty() && !name.contains('/') => Some(name),
            _ => {
                ctx.at(
                    "invalid-tool-source",
                    &path!["agent", "tools", i, "source"],
                    format!("tool source `{}` must be `mcp://NAME`, NAME being a server under `mcp_servers` in pap.yaml", tool.source),
                );
                None
            }
        };
        if let (Some(name), Some(servers)) = (server, env.servers)
            && !servers.contains(name)
        {
            let d = ctx.at(
                "unknown-mcp-server",
                &path!["agent", "tools", i, "source"],
                format!("MCP server `{name}` is not defined under `mcp_servers` in pap.yaml"),
            );
            match did_you_mean(name, servers.iter().map(String::as_str)) {
                Some(s) => d.help(s),
                None if servers.is_empty() => d.help("pap.yaml defines no MCP servers"),
                None => d.help(format!(
                    "defined servers: {}",
                    servers.iter().cloned().collect::<Vec<_>>().join(", ")
                )),
            }
        }
        if seen.contains(&(tool.name.as_str(), tool.source.as_str())) {
            ctx.at(
                "duplicate-tool",
                &path!["agent", "tools", i, "name"],
                format!(
                    "tool `{}` from `{}` is listed twice",
                    tool.name, tool.source
                ),
            );
        }
        seen.push((&tool.name, &tool.source));
        let risk = tool.risk_override.unwrap_or(raw.risk_level);
        let internal = tool.impact == Some(Impact::Internal);
        if internal && risk >= RiskLevel::Medium {
            ctx.at(
                "internal-tool-risk",
                &path!["agent", "tools", i, "impact"],
                format!(
                    "tool `{}` is marked internal but its risk is {}, so every call is still reported as external",
                    tool.name,
                    risk.as_str()
                ),
            )
            .help("a tool is internal only with `impact: internal` and a risk of read_only or low");
        }
        let spec = ToolSpec {
            name: tool.name.clone(),
            server: server.unwrap_or_default().to_string(),
            risk,
            external: !(internal && risk <= RiskLevel::Low),
            flags: tool.flags.clone(),
            notifications: tool.notifications.clone(),
        };
        check_tool_notifications(ctx, i, &spec);
        out.push((spec, tool.risk_override));
    }
    out
}

/// JP RFD 011: a tool's `notifications:` switches only names the tool emits, so a misspelt
/// or meaningless switch is refused instead of silently switching nothing.
fn check_tool_notifications(ctx: &mut FileCtx, i: usize, spec: &ToolSpec) {
    let emits = spec.notification_names();
    for name in spec.notifications.keys() {
        if emits.contains(&name.as_str()) {
            continue;
        }
        let at = path!["agent", "tools", i, "notifications", name.as_str()];
        let d = ctx.at_key(
            "unknown-tool-notification",
            &at,
            format!(
                "`{}`: tool `{}` emits no notification `{name}`",
                display_path(&at),
                spec.name
            ),
        );
        match emits {
            [] => d.help(
                "an internal tool emits no notifications (an external one emits `external_call`)",
            ),
            names => d.help(format!(
                "it emits: {}",
                names
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
}

fn compile_output(ctx: &mut FileCtx, raw: &raw::Agent) -> OutputSpec {
    let Some(output) = &raw.output else {
        return OutputSpec::default();
    };
    let structured = output.output_type == OutputType::Structured;
    if !structured && output.schema.is_some() {
        ctx.at_key(
            "unused-field",
            &path!["agent", "output", "schema"],
            "`output.schema` has no effect with `type: text`",
        );
    }
    OutputSpec {
        structured,
        schema: if structured {
            output.schema.clone()
        } else {
            None
        },
    }
}

fn check_emit_type(ctx: &mut FileCtx, t: &str, at: &[super::yaml_tree::PathSeg], declared: bool) {
    if let Err(problem) = event_type::check(t, false) {
        ctx.at(
            "invalid-emit-type",
            at,
            format!("event type `{t}` {problem}"),
        )
        .help("event types are dot notation: domain.object.condition");
        return;
    }
    if declared && t.starts_with("pap.") {
        ctx.at(
            "reserved-event-type",
            at,
            format!(
                "`{t}` uses the reserved `pap.` prefix; only the dispatcher emits pap.* events"
            ),
        )
        .help("completion and failure events come from on_complete/on_failure");
    }
    if let Some(word) = event_type::change_word(t) {
        ctx.at(
            "change-not-crossing",
            at,
            format!("event type `{t}` describes a change (`{word}`), not a threshold crossing"),
        );
    }
}

/// MCP endpoints and provider base URLs must be plain HTTP(S).
pub(crate) fn is_http_url(url: &str) -> bool {
    url.starts_with("http://") || url.starts_with("https://")
}
