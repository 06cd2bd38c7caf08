//! Compile step for notifications: an agent's `notify:` routes and pap.yaml's
//! `notifications:` (user, deadline, delivery filter, sinks).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::compile_agent::is_http_url;
use super::compiled_notify::{
    KindFilter, NotifyConfig, OutcomeKind, RouteSpec, SinkSpec, SinkTarget, WebhookFormat,
};
use super::duration;
use super::file_ctx::{FileCtx, HelpExt};
use super::raw::{self, NotifyRoute, SinkKind};
use super::yaml_tree::PathSeg;
use crate::domain::{Address, AgentInstructions, Handler, Party, Routing};
use crate::interpolate;
use crate::path;
use crate::template::Template;

/// The routes of every outcome, defaults filled in, of `notify:` under `section` (an agent's,
/// or a trigger's, which wins for that trigger's invocations).
pub(crate) fn compile_routes(
    raw: Option<&raw::Notify>,
    section: &'static str,
    ctx: &mut FileCtx,
) -> BTreeMap<OutcomeKind, RouteSpec> {
    let mut out = BTreeMap::new();
    let Some(raw) = raw else {
        return out;
    };
    for kind in OutcomeKind::ALL {
        let route = match kind {
            OutcomeKind::Succeeded => &raw.succeeded,
            OutcomeKind::Failed => &raw.failed,
            OutcomeKind::AwaitingApproval => &raw.awaiting_approval,
            OutcomeKind::Rejected => &raw.rejected,
            OutcomeKind::Expired => &raw.expired,
            OutcomeKind::Cancelled => &raw.cancelled,
            OutcomeKind::ExternalToolCall => &raw.external_tool_call,
        };
        if let Some(route) = route {
            let base = path![section, "notify", kind.key()];
            out.insert(kind, compile_route(route, kind, &base, ctx));
        }
    }
    out
}

fn compile_route(
    r: &NotifyRoute,
    kind: OutcomeKind,
    base: &[PathSeg],
    ctx: &mut FileCtx,
) -> RouteSpec {
    let at = |field: &str| {
        let mut p = base.to_vec();
        p.extend(path![field]);
        p
    };
    let routing = Routing {
        address: r.address.unwrap_or_default(),
        target: r.target.unwrap_or_default(),
        handler: r.handler.unwrap_or_default(),
    };
    let agent_side = routing.handler == Handler::Agent || routing.target == Party::Agent;
    if agent_side && r.agent.is_none() {
        let field = if routing.handler == Handler::Agent {
            "handler"
        } else {
            "target"
        };
        ctx.at(
            "notify-routing",
            &at(field),
            format!("`{}`: a notification for an agent needs `agent`, the agent that receives or handles it", kind.key()),
        )
        .help("add `agent: AGENT_ID`");
    }
    if kind == OutcomeKind::AwaitingApproval && agent_side {
        ctx.at(
            "notify-routing",
            &at(if routing.handler == Handler::Agent { "handler" } else { "target" }),
            "an approval request must reach a human: `awaiting_approval` takes target user and handler system",
        );
    }
    // ANP 6.1: the user must be made aware of every EXTERNAL call, a hard requirement.
    if kind == OutcomeKind::ExternalToolCall {
        if r.enabled == Some(false) {
            ctx.at(
                "notify-routing",
                &at("enabled"),
                "the user must be told of every external tool call (ANP 6.1): `external_tool_call` cannot be switched off",
            )
            .help("mark a tool that changes nothing outside `impact: internal`, or hold back an agent's copy with the tool's `notifications: {external_call: false}`");
        }
        if routing.target == Party::Agent {
            ctx.at(
                "notify-routing",
                &at("target"),
                "the user must be told of every external tool call (ANP 6.1): `external_tool_call` takes target user",
            )
            .help("keep target user; `agent:` still makes that agent aware of each call");
        }
    }
    if routing.address == Address::Session && r.session.is_none() {
        ctx.at(
            "notify-routing",
            &at("address"),
            format!("`{}`: address `session` needs `session`, the session thread's name", kind.key()),
        )
        .help("e.g. session: \"incident-{event.data.server}\"; open it with `pap inbox session open NAME`");
    }
    if routing.address == Address::User && r.session.is_some() {
        ctx.at_key(
            "unused-field",
            &at("session"),
            "`session` has no effect with address `user`",
        );
    }
    if routing.handler == Handler::System && r.deadline.is_some() {
        ctx.at_key(
            "unused-field",
            &at("deadline"),
            "`deadline` has no effect with handler `system`: only a handling agent has a deadline",
        );
    }
    let mut template = |field: &str, text: &Option<String>| {
        let text = text.as_ref()?;
        match Template::parse(text) {
            Ok(t) => Some(t),
            Err(reason) => {
                ctx.at(
                    "invalid-template",
                    &at(field),
                    format!("`{field}`: {reason}"),
                );
                None
            }
        }
    };
    let session = template("session", &r.session);
    let deduplication_key = template("deduplication_key", &r.deduplication_key);
    let content = template("content", &r.content);
    let deadline = r
        .deadline
        .as_ref()
        .and_then(|text| match duration::parse(text) {
            Ok(d) if !d.is_zero() => Some(d),
            Ok(_) => {
                ctx.at(
                    "invalid-duration",
                    &at("deadline"),
                    format!("`deadline` `{text}`: must be longer than zero"),
                );
                None
            }
            Err(reason) => {
                ctx.at(
                    "invalid-duration",
                    &at("deadline"),
                    format!("`deadline` `{text}`: {reason}"),
                )
                .help("durations look like 90s, 30m, 24h, 7d or 1h30m");
                None
            }
        });
    let instructions =
        (r.directive.is_some() || r.tone_hint.is_some()).then(|| AgentInstructions {
            directive: r.directive.clone(),
            tone_hint: r.tone_hint.clone(),
        });
    RouteSpec {
        enabled: r.enabled.unwrap_or(true),
        routing,
        session,
        agent: r.agent.clone(),
        level: r.level,
        deduplication_key,
        content,
        instructions,
        deadline,
    }
}

/// `notifications:` of pap.yaml.
pub(crate) fn compile_settings(
    raw: Option<&raw::NotificationSettings>,
    ctx: &mut FileCtx,
) -> NotifyConfig {
    let mut config = NotifyConfig::default();
    let Some(raw) = raw else {
        return config;
    };
    if let Some(user) = raw.user.as_ref().filter(|u| !u.trim().is_empty()) {
        config.user = user.clone();
    }
    config.project = raw.project.clone();
    if let Some(text) = &raw.deadline {
        match duration::parse(text) {
            Ok(d) if !d.is_zero() => config.deadline = d,
            Ok(_) => {
                ctx.at(
                    "invalid-duration",
                    &path!["notifications", "deadline"],
                    format!("`deadline` `{text}`: must be longer than zero"),
                );
            }
            Err(reason) => {
                ctx.at(
                    "invalid-duration",
                    &path!["notifications", "deadline"],
                    format!("`deadline` `{text}`: {reason}"),
                )
                .help("durations look like 90s, 30m, 24h, 7d or 1h30m");
            }
        }
    }
    config.kinds = KindFilter(raw.kinds.clone());
    let mut names = BTreeSet::new();
    for (i, sink) in raw.sinks.iter().enumerate() {
        let base = path!["notifications", "sinks", i];
        if !names.insert(sink.name.clone()) {
            let mut at = base.to_vec();
            at.extend(path!["name"]);
            ctx.at(
                "invalid-sink",
                &at,
                format!("two sinks are named `{}`", sink.name),
            );
            continue;
        }
        if let Some(spec) = compile_sink(sink, &base, ctx) {
            config.sinks.push(spec);
        }
    }
    config
}

fn compile_sink(s: &raw::Sink, base: &[PathSeg], ctx: &mut FileCtx) -> Option<SinkSpec> {
    let at = |field: &str| {
        let mut p = base.to_vec();
        p.extend(path![field]);
        p
    };
    let errors = ctx.error_count();
    if s.name.is_empty()
        || !s
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        ctx.at(
            "invalid-sink",
            &at("name"),
            format!(
                "sink name `{}` may hold only letters, digits, `-` and `_`",
                s.name
            ),
        );
    }
    let kind = match s.kind {
        SinkKind::Webhook => "webhook",
        SinkKind::Command => "command",
        SinkKind::Ndjson => "ndjson",
    };
    let unused = |ctx: &mut FileCtx, field: &str, set: bool| {
        if set {
            ctx.at_key(
                "unused-field",
                &at(field),
                format!("`{field}` has no effect on a `{kind}` sink"),
            );
        }
    };
    let target = match s.kind {
        SinkKind::Webhook => {
            unused(ctx, "command", s.command.is_some());
            unused(ctx, "path", s.path.is_some());
            let Some(url) = &s.url else {
                ctx.at("invalid-sink", &at("type"), "a webhook sink needs `url`");
                return None;
            };
            if let Err(reason) = interpolate::check(url) {
                ctx.at("invalid-interpolation", &at("url"), reason.to_string());
            } else if !is_http_url(url) && !url.starts_with("${") {
                ctx.at(
                    "invalid-url",
                    &at("url"),
                    "a webhook `url` must start with http:// or https://",
                );
            }
            for (name, value) in &s.headers {
                if let Err(reason) = interpolate::check(value) {
                    let mut p = at("headers");
                    p.extend(path![name.as_str()]);
                    ctx.at("invalid-interpolation", &p, reason.to_string());
                }
            }
            let format = s.format.unwrap_or_default();
            if format == WebhookFormat::Ntfy && s.topic.is_none() {
                ctx.at("invalid-sink", &at("format"), "format `ntfy` needs `topic`");
            }
            if format != WebhookFormat::Ntfy {
                unused(ctx, "topic", s.topic.is_some());
            }
            SinkTarget::Webhook {
                url: url.clone(),
                headers: s.headers.clone(),
                format,
                topic: s.topic.clone(),
            }
        }
        SinkKind::Command => {
            for (field, set) in [
                ("url", s.url.is_some()),
                ("path", s.path.is_some()),
                ("format", s.format.is_some()),
                ("topic", s.topic.is_some()),
                ("headers", !s.headers.is_empty()),
            ] {
                unused(ctx, field, set);
            }
            let argv = s.command.as_deref().unwrap_or_default();
            let Some(program) = argv.first().filter(|p| !p.trim().is_empty()) else {
                ctx.at(
                    "invalid-sink",
                    &at("type"),
                    "a command sink needs `command`: the program and its arguments",
                );
                return None;
            };
            SinkTarget::Command {
                program: PathBuf::from(program),
                args: argv[1..].to_vec(),
            }
        }
        SinkKind::Ndjson => {
            for (field, set) in [
                ("url", s.url.is_some()),
                ("command", s.command.is_some()),
                ("format", s.format.is_some()),
                ("topic", s.topic.is_some()),
                ("headers", !s.headers.is_empty()),
            ] {
                unused(ctx, field, set);
            }
            let Some(path) = s.path.as_ref().filter(|p| !p.trim().is_empty()) else {
                ctx.at("invalid-sink", &at("type"), "an ndjson sink needs `path`");
                return None;
            };
            SinkTarget::Ndjson {
                path: PathBuf::from(path),
            }
        }
    };
    for (i, k) in s.kinds.iter().enumerate() {
        if k.split('.').any(str::is_empty) {
            let mut p = at("kinds");
            p.extend(path![i]);
            ctx.at(
                "invalid-sink",
                &p,
                format!("kind pattern `{k}` has an empty segment"),
            );
        }
    }
    if ctx.error_count() > errors {
        return None;
    }
    Some(SinkSpec {
        name: s.name.clone(),
        target,
        min_level: s.min_level.unwrap_or_default(),
        kinds: s.kinds.clone(),
        max_attempts: s.max_attempts.unwrap_or(5).max(1),
        backoff: Duration::from_secs_f64(s.backoff_seconds.unwrap_or(2.0).max(0.0)),
        timeout: Duration::from_secs(s.timeout_seconds.unwrap_or(10)),
    })
}

/// Resolves a sink program like an agent's: a path with `/` is relative to the root.
pub(crate) fn resolve_program(root: &Path, program: &Path) -> PathBuf {
    if program.components().count() > 1 && !program.is_absolute() {
        root.join(program)
    } else {
        program.to_path_buf()
    }
}
