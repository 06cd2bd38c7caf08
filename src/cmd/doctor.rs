//! `pap doctor`: what would stop the first real page, checked before it: the project loads,
//! the state dir is writable, each provider's key and listener token is set, each program
//! exists, each MCP server starts and lists the tools the agents use, each sink's address
//! resolves. One line per check; exit 1 when any fails.
//!
//! Variables and programs are checked in two environments when a serve runs on the state:
//! this shell's and serve's (asked over the control socket, names only). Serve runs retries
//! and new work, so its side decides the verdict, and the line says which one a retry uses.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use super::{Outcome, context};
use crate::cli::{Cli, DoctorArgs};
use crate::manifest::Project;
use crate::manifest::compiled::{McpServerSpec, ModelSpec};
use crate::manifest::compiled_notify::SinkTarget;
use crate::term::Paint;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Verdict {
    Ok,
    Warn,
    Fail,
}

#[derive(Debug, Serialize)]
struct Check {
    check: String,
    status: Verdict,
    detail: String,
    /// Variables and programs: what this shell's environment has (`set`, `not set`, a path).
    #[serde(skip_serializing_if = "Option::is_none")]
    shell: Option<String>,
    /// The same in the running serve's environment, when one answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    serve: Option<String>,
}

fn check(checks: &mut Vec<Check>, name: String, verdict: Verdict, detail: String) {
    checks.push(Check {
        check: name,
        status: verdict,
        detail,
        shell: None,
        serve: None,
    });
}

/// The running serve's side, when one answered: its pid and its view.
type ServeSide = Option<(u32, crate::env_view::View)>;

pub(super) fn run(cli: &Cli, args: &DoctorArgs) -> anyhow::Result<Outcome> {
    let mut checks = Vec::new();
    match context::load_project(cli) {
        Ok(project) => {
            check(
                &mut checks,
                "project".into(),
                Verdict::Ok,
                format!(
                    "{} ({} triggers, {} agents, {} schedules)",
                    project.root.display(),
                    project.triggers.len(),
                    project.agents.len(),
                    project.schedules.len()
                ),
            );
            let dir = context::state_dir(cli, &project);
            state_dir(&mut checks, &dir);
            let serve = crate::serve::control::environment(&dir);
            let shell = crate::env_view::view(&project, &|name| std::env::var_os(name));
            runs_in(&mut checks, &serve);
            variables(&mut checks, &shell, &serve);
            programs(&mut checks, &project);
            serve_programs(&mut checks, &shell, &serve);
            mcp_servers(&mut checks, &project, args.timeout)?;
            sinks(&mut checks, &project);
        }
        Err(e) => check(
            &mut checks,
            "project".into(),
            Verdict::Fail,
            crate::error_text::describe(&e),
        ),
    }
    print(&checks, args.json)?;
    Ok(if checks.iter().any(|c| c.status == Verdict::Fail) {
        Outcome::Failure
    } else {
        Outcome::Success
    })
}

/// Writable: a file can be made in it (or, before the first run, in the directory it will be
/// made in). Nothing is left behind.
fn state_dir(checks: &mut Vec<Check>, dir: &Path) {
    let existing = dir.ancestors().find(|d| d.is_dir());
    let verdict = match existing {
        Some(at) => match tempfile::Builder::new()
            .prefix(".pap-doctor-")
            .tempfile_in(at)
        {
            Ok(_) if at == dir => (Verdict::Ok, format!("{} is writable", dir.display())),
            Ok(_) => (
                Verdict::Ok,
                format!(
                    "{} will be created (in {}, which is writable)",
                    dir.display(),
                    at.display()
                ),
            ),
            Err(e) => (
                Verdict::Fail,
                format!("{}: cannot write in {}: {e}", dir.display(), at.display()),
            ),
        },
        None => (
            Verdict::Fail,
            format!("{}: no directory above it exists", dir.display()),
        ),
    };
    check(checks, "state dir".into(), verdict.0, verdict.1);
}

/// Where retries and new work run: the serve on this state, or (none running) whatever
/// starts next from this shell.
fn runs_in(checks: &mut Vec<Check>, serve: &ServeSide) {
    let detail = match serve {
        Some((pid, _)) => format!(
            "pap serve (pid {pid}) runs retries and new work: its environment is the one that counts"
        ),
        None => "no pap serve answers on this state: the next `pap serve` or `pap dispatch` started from this shell runs the work".to_owned(),
    };
    check(checks, "runs in".into(), Verdict::Ok, detail);
}

/// What a variable that is not set stops.
fn consequence(var: &crate::env_view::Variable) -> String {
    let what = match var.role.as_str() {
        "provider key" => "cannot run (each run would fail at once)",
        "listen token" => "cannot sign in (serve refuses to start its listener without it)",
        _ => "cannot start",
    };
    format!("{} {what}", var.needed_by.join(", "))
}

fn said(set: bool) -> &'static str {
    if set { "set" } else { "not set" }
}

/// Each variable the project needs, in this shell and in serve.
fn variables(checks: &mut Vec<Check>, shell: &crate::env_view::View, serve: &ServeSide) {
    for var in &shell.variables {
        let who = var.needed_by.join(", ");
        // `None` on serve's side: serve's loaded project does not use the variable (a manifest
        // changed since its last reload): not a verdict on serve's environment.
        let seen = serve
            .as_ref()
            .map(|(pid, view)| (*pid, view.variable(&var.name, &var.role).map(|v| v.set)));
        if let Some((pid, None)) = seen {
            checks.push(Check {
                check: format!("{} {}", var.role, var.name),
                status: Verdict::Warn,
                detail: format!(
                    "serve (pid {pid}) runs a project that does not use it yet (reload serve); {} in this shell ({who})",
                    said(var.set)
                ),
                shell: Some(said(var.set).to_owned()),
                serve: None,
            });
            continue;
        }
        let on_serve = seen.map(|(pid, set)| (pid, set.unwrap_or(false)));
        let (verdict, detail) = match on_serve {
            Some((pid, true)) if var.set => (
                Verdict::Ok,
                format!("set in serve (pid {pid}) and in this shell ({who})"),
            ),
            Some((pid, true)) => (
                Verdict::Warn,
                format!(
                    "set in serve (pid {pid}), which a retry uses; not in this shell, so a `pap dispatch` run from here would fail ({who})"
                ),
            ),
            Some((pid, false)) => (
                Verdict::Fail,
                format!(
                    "not set in serve's environment (pid {pid}), which runs retries and new work: {}{}",
                    consequence(var),
                    if var.set {
                        "; it is set in this shell, which serve does not read: set it where serve starts (its unit's Environment=, or the shell that started it) and restart serve"
                    } else {
                        ""
                    }
                ),
            ),
            None if var.set => (Verdict::Ok, format!("set in this shell ({who})")),
            None => (Verdict::Fail, format!("not set: {}", consequence(var))),
        };
        checks.push(Check {
            check: format!("{} {}", var.role, var.name),
            status: verdict,
            detail,
            shell: Some(said(var.set).to_owned()),
            serve: on_serve.map(|(_, set)| said(set).to_owned()),
        });
    }
}

/// Programs serve cannot find though this shell can (a PATH that differs): the shell's side is
/// checked by `programs` and `mcp_servers`.
fn serve_programs(checks: &mut Vec<Check>, shell: &crate::env_view::View, serve: &ServeSide) {
    let Some((pid, view)) = serve else {
        return;
    };
    for p in &view.programs {
        let here = shell.program(&p.role).map(|s| s.found.clone());
        let (verdict, detail) = match (&p.found, &here) {
            (Ok(_), _) => continue,
            (Err(why), Some(Ok(path))) => (
                Verdict::Fail,
                format!(
                    "serve (pid {pid}) cannot find `{}`: {why}; this shell finds {path}: give serve the same PATH, or an absolute path",
                    p.name
                ),
            ),
            (Err(why), _) => (
                Verdict::Fail,
                format!("serve (pid {pid}) cannot find `{}`: {why}", p.name),
            ),
        };
        checks.push(Check {
            check: format!("{} program in serve", p.role),
            status: verdict,
            detail,
            shell: here.map(|h| h.unwrap_or_else(|e| e)),
            serve: Some(p.found.clone().unwrap_or_else(|e| e)),
        });
    }
}

fn programs(checks: &mut Vec<Check>, project: &Project) {
    for agent in &project.agents {
        if let ModelSpec::Command { program, .. } = &agent.model {
            let text = program.display().to_string();
            let (verdict, detail) = match crate::program::locate(&text, &project.root) {
                Ok(path) => (Verdict::Ok, path.display().to_string()),
                Err(why) => (Verdict::Fail, why.to_string()),
            };
            check(
                checks,
                format!("agent {} program", agent.id),
                verdict,
                detail,
            );
        }
    }
}

/// Each MCP server: its command exists, it starts within `timeout` and lists its tools, and
/// every tool an agent uses from it is among them.
fn mcp_servers(
    checks: &mut Vec<Check>,
    project: &Project,
    timeout: Duration,
) -> anyhow::Result<()> {
    let specs = &project.config.mcp_servers;
    if specs.is_empty() {
        return Ok(());
    }
    let mut used: BTreeMap<&str, Vec<(&str, &str)>> = BTreeMap::new();
    for agent in &project.agents {
        for tool in &agent.tools {
            used.entry(tool.server.as_str())
                .or_default()
                .push((tool.name.as_str(), agent.id.as_str()));
        }
    }
    let rt = context::tokio_runtime()?;
    for (name, spec) in specs {
        let label = format!("mcp server {name}");
        if let McpServerSpec::Stdio { command, .. } = spec
            && let Err(why) = crate::program::locate(command, &project.root)
        {
            check(checks, label, Verdict::Fail, why.to_string());
            continue;
        }
        let names = BTreeSet::from([name.clone()]);
        let listed = rt.block_on(async {
            let session = tokio::time::timeout(
                timeout,
                crate::agent::mcp::Session::connect(&project.root, specs, &names, &[]),
            )
            .await
            .map_err(|_| format!("did not start within {}s", timeout.as_secs()))?
            .map_err(|e| e.reason)?;
            let tools = tokio::time::timeout(timeout, session.list_tools()).await;
            let mut session = session;
            session.shutdown().await;
            tools
                .map_err(|_| format!("did not list its tools within {}s", timeout.as_secs()))?
                .map_err(|e| e.to_string())
        });
        let tools = match listed {
            Ok(tools) => tools,
            Err(why) => {
                // The line names the server already.
                let prefix = format!("MCP server `{name}`: ");
                let why = why.strip_prefix(&prefix).map(str::to_owned).unwrap_or(why);
                check(checks, label, Verdict::Fail, why);
                continue;
            }
        };
        let have: BTreeSet<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        let missing: Vec<String> = used
            .get(name.as_str())
            .into_iter()
            .flatten()
            .filter(|(tool, _)| !have.contains(tool))
            .map(|(tool, agent)| format!("{tool} (agent {agent})"))
            .collect();
        let (verdict, detail) = match (missing.is_empty(), used.contains_key(name.as_str())) {
            (false, _) => (
                Verdict::Fail,
                format!("lacks {}; it lists {}", missing.join(", "), have.len()),
            ),
            (true, true) => (
                Verdict::Ok,
                format!(
                    "started; lists {} tools, every one the agents use among them",
                    have.len()
                ),
            ),
            (true, false) => (
                Verdict::Warn,
                format!("started; lists {} tools, but no agent uses it", have.len()),
            ),
        };
        check(checks, label, verdict, detail);
    }
    Ok(())
}

fn sinks(checks: &mut Vec<Check>, project: &Project) {
    for sink in &project.config.notify.sinks {
        let label = format!("sink {}", sink.name);
        let (verdict, detail) = match &sink.target {
            SinkTarget::Webhook { url, .. } => webhook_resolves(url),
            SinkTarget::Command { program, .. } => {
                match crate::program::locate(&program.display().to_string(), &project.root) {
                    Ok(path) => (Verdict::Ok, path.display().to_string()),
                    Err(why) => (Verdict::Fail, why.to_string()),
                }
            }
            SinkTarget::Ndjson { path } => {
                let path = project.root.join(path);
                match path
                    .parent()
                    .and_then(|d| d.ancestors().find(|a| a.is_dir()))
                {
                    Some(dir) if tempfile::tempfile_in(dir).is_ok() => (
                        Verdict::Ok,
                        format!("{} (its directory is writable)", path.display()),
                    ),
                    _ => (
                        Verdict::Fail,
                        format!("{}: its directory is not writable", path.display()),
                    ),
                }
            }
        };
        check(checks, label, verdict, detail);
    }
}

/// The webhook's host resolves (its `${NAME}` parts expanded; the URL is never printed whole,
/// since a secret may be part of it).
fn webhook_resolves(url: &str) -> (Verdict, String) {
    let expanded = match crate::interpolate::expand(url, |name| std::env::var(name).ok()) {
        Ok(u) => u,
        Err(e) => return (Verdict::Fail, format!("its URL cannot be made: {e}")),
    };
    let parsed = match reqwest::Url::parse(&expanded) {
        Ok(u) => u,
        Err(e) => return (Verdict::Fail, format!("its URL is not valid: {e}")),
    };
    let Some(host) = parsed.host_str() else {
        return (Verdict::Fail, "its URL has no host".into());
    };
    let port = parsed.port_or_known_default().unwrap_or(443);
    use std::net::ToSocketAddrs;
    match (host, port).to_socket_addrs() {
        Ok(mut addrs) => match addrs.next() {
            Some(addr) => (Verdict::Ok, format!("{host} resolves ({})", addr.ip())),
            None => (Verdict::Fail, format!("{host} resolves to no address")),
        },
        Err(e) => (Verdict::Fail, format!("{host} does not resolve: {e}")),
    }
}

fn print(checks: &[Check], json: bool) -> std::io::Result<()> {
    if json {
        for c in checks {
            crate::out!("{}", serde_json::to_string(c).expect("JSON"))?;
        }
        return Ok(());
    }
    let p = Paint::for_stdout();
    for c in checks {
        let mark = match c.status {
            Verdict::Ok => p.green("ok  "),
            Verdict::Warn => p.yellow("warn"),
            Verdict::Fail => p.red("FAIL"),
        };
        crate::out!("{mark}  {}: {}", c.check, c.detail)?;
    }
    let failed = checks.iter().filter(|c| c.status == Verdict::Fail).count();
    if failed > 0 {
        crate::out!("{failed} problem(s)")?;
    }
    Ok(())
}
